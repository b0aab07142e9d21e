//! NGINX rollouts end to end: the canary Ingresses Argo writes at each step, the events
//! and errors it reports, and what requests through ingress-nginx see, on a case held out
//! from the bundled scenarios (`tests/fixtures/nginx`).

use canarysim::load::SplitUnit;
use canarysim::model::ingress::ingress_kind;
use canarysim::model::{Kind, Manifest};
use canarysim::sim::{ClusterConfig, World};
use canarysim::testing::{check_scenario, run_scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const NS: &str = "shop";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nginx")
        .join(name)
}

/// Two stable Ingresses, setWeight 20 then 50, a header canary by value: the canary
/// Ingresses are Argo's (names, rules, annotations, checked by the scenario's `expect`),
/// and 100,000 requests through ingress-nginx split as set, every request with the
/// header's value reaching the canary.
#[test]
fn the_held_out_nginx_rollout_routes_as_argo_and_ingress_nginx_do() {
    if let Err(e) = check_scenario(&fixture("held-out.yaml")) {
        panic!("{e}");
    }
    let report = run_scenario(&fixture("held-out.yaml"), None).unwrap();
    let loads = passed_loads(&report);
    assert_eq!(loads.len(), 4);
    for load in loads {
        assert_eq!(load.path, "gateway ingress-nginx/ingress-nginx-controller");
        assert_eq!(load.sent, load.answered);
    }
}

/// Flagger's `nginx` provider's canary Ingress, as its `pkg/router/ingress.go` writes it
/// in A/B testing and then weighted (the fixture says how): the header's exact value and
/// the cookie named by the match routes to the canary, what Istio's match would mean does
/// not, a prefix match keeps only the header's name, and the weight splits as set.
#[test]
fn flagger_canary_ingresses_route_as_ingress_nginx_reads_them() {
    if let Err(e) = check_scenario(&fixture("flagger-ab.yaml")) {
        panic!("{e}");
    }
    let report = run_scenario(&fixture("flagger-ab.yaml"), None).unwrap();
    let loads = passed_loads(&report);
    assert_eq!(loads.len(), 9);
    let yellow = |l: &canarysim::outcome::LoadReport| {
        l.versions
            .iter()
            .filter(|v| v.version == "yellow")
            .map(|v| v.share)
            .sum::<f64>()
    };
    let shares: Vec<f64> = loads.iter().map(|l| yellow(l)).collect();
    assert_eq!(&shares[..5], &[0.0, 1.0, 1.0, 0.0, 0.0], "{shares:?}");
    assert_eq!(&shares[5..7], &[0.0, 1.0], "{shares:?}");
    assert!((shares[7] - 0.1).abs() < 0.01, "{shares:?}");
    assert_eq!(shares[8], 0.0);
}

/// Argo's getting-started with a regex path on the stable Ingress (`use-regex`,
/// `ImplementationSpecific`): Argo copies the path into the canary Ingress, the canary
/// merges into the regex location, and a request matching it case-insensitively splits as
/// set; one that does not is answered 404.
#[test]
fn a_regex_location_takes_its_canary_as_any_other() {
    let edit = |text: String| {
        text.replace(
            "          kubernetes.io/ingress.class: nginx\n      spec:",
            "          kubernetes.io/ingress.class: nginx\n          nginx.ingress.kubernetes.io/use-regex: \"true\"\n      spec:",
        )
        .replace(
            "            - path: /\n              pathType: Prefix",
            "            - path: /app/[a-z]+\n              pathType: ImplementationSpecific",
        )
    };
    let text = edit(std::fs::read_to_string(bundled("nginx-getting-started.yaml")).unwrap());
    assert!(text.contains("use-regex") && text.contains("/app/[a-z]+"));
    let steps = "steps:\n  - wait: {until: healthy, timeout: 1m}\n  - set_image: {rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}\n  - wait: {until: paused, timeout: 1m}\n  - wait: 2s\n  - load: {requests: 100000, path: /APP/cart}\n  - expect_split: {canary: 5%, within: 0.5%}\n  - load: {requests: 1000, path: /app/42}\n";
    let text = format!("{}{steps}", text.split("steps:\n  - wait").next().unwrap());
    let dir = crate::support::temp_dir();
    let path = dir.path().join("regex.yaml");
    std::fs::write(&path, text).unwrap();
    let report = run_scenario(&path, None).unwrap();
    let loads = passed_loads(&report);
    assert_eq!(loads[0].answered, 100_000, "{:?}", loads[0]);
    assert_eq!(loads[1].not_found, 1_000, "{:?}", loads[1]);
}

/// The report's loads, once every step has passed.
fn passed_loads(report: &canarysim::outcome::RunReport) -> Vec<&canarysim::outcome::LoadReport> {
    assert!(report.steps.iter().all(|s| s.passed), "{:#?}", report.steps);
    report
        .steps
        .iter()
        .filter_map(|s| s.load.as_ref())
        .collect()
}

/// The held-out manifests with `edit` applied to their text, 30 s after applying them.
fn world(edit: impl Fn(String) -> String) -> World {
    let text = edit(std::fs::read_to_string(fixture("manifests.yaml")).unwrap());
    let manifests: Vec<Manifest> =
        canarysim::model::yaml::load_str("manifests.yaml", &text, NS).unwrap();
    let mut w = World::new(ClusterConfig::default(), 1);
    w.apply(&manifests).unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    w
}

fn rollout_status(w: &World) -> Value {
    w.api
        .get(Kind::Rollout, NS, "checkout")
        .unwrap()
        .status()
        .clone()
}

fn canary_weight(w: &World, name: &str) -> Option<String> {
    let ingress = w.api.get(ingress_kind(), NS, name).ok()?;
    ingress.value["metadata"]["annotations"]["nginx.ingress.kubernetes.io/canary-weight"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn argo_creates_the_canary_ingresses_then_patches_them_with_its_events() {
    let mut w = world(|t| t);
    assert_eq!(rollout_status(&w)["phase"], "Healthy");
    let public = "checkout-checkout-public-canary";
    assert_eq!(canary_weight(&w, public).as_deref(), Some("0"));
    w.set_image(NS, "checkout", "checkout", "shop/checkout:v2")
        .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(canary_weight(&w, public).as_deref(), Some("20"));
    let internal = "checkout-checkout-internal-canary";
    assert_eq!(canary_weight(&w, internal).as_deref(), Some("20"));
    let events: Vec<(String, String)> = w
        .events
        .iter()
        .filter(|e| e.reason.contains("CanaryIngress"))
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    assert_eq!(
        events[..2],
        [
            (
                "CreatingCanaryIngress".to_string(),
                format!("Creating canary ingress `{public}` with weight `0`")
            ),
            (
                "CreatingCanaryIngress".to_string(),
                format!("Creating canary ingress `{internal}` with weight `0`")
            ),
        ]
    );
    assert!(
        events.contains(&(
            "PatchingCanaryIngress".to_string(),
            format!("Updating Ingress `{public}` to desiredWeight '20'")
        )),
        "{events:#?}"
    );
    // A canary Ingress another object controls is an error, and Argo leaves it alone.
    let mut ingress = w.api.get(ingress_kind(), NS, public).unwrap().clone();
    ingress.value["metadata"]["ownerReferences"][0]["uid"] = "someone-else".into();
    w.api.update(ingress).unwrap();
    w.promote(NS, "checkout", false).unwrap();
    w.advance(Duration::from_secs(5)).unwrap();
    let error = w.errors.values().next().cloned().unwrap_or_default();
    assert_eq!(
        error,
        format!("canary ingress `{public}` controlled by different object")
    );
}

#[test]
fn missing_or_unfit_stable_ingresses_make_the_rollout_invalid_as_argo_says() {
    let message = |w: &World| rollout_status(w)["message"].as_str().unwrap().to_string();
    let w = world(|t| t.replace("name: checkout-internal}", "name: elsewhere}"));
    assert_eq!(
        message(&w),
        "InvalidSpec: The Rollout \"checkout\" is invalid: spec.strategy.canary.trafficRouting.nginx.StableIngresses: Invalid value: []string{\"checkout-public\", \"checkout-internal\"}: ingress.networking.k8s.io \"checkout-internal\" not found"
    );
    let w = world(|t| {
        t.replace(
            "stableIngresses: [checkout-public, checkout-internal]",
            "stableIngress: checkout-public\n          stableIngresses: [checkout-internal]",
        )
    });
    assert_eq!(
        message(&w),
        "InvalidSpec: The Rollout \"checkout\" is invalid: spec.strategy.canary.trafficRouting.nginx: Internal error: Either StableIngress or StableIngresses must be configured. Both are configured."
    );
    let w = world(|t| {
        t.replace(
            "stableIngresses: [checkout-public, checkout-internal]",
            "stableIngress: checkout-internal",
        )
        .replace(
            "- {path: /, pathType: Prefix, backend: {service: {name: checkout-stable",
            "- {path: /, pathType: Prefix, backend: {service: {name: static",
        )
    });
    assert_eq!(
        message(&w),
        "InvalidSpec: The Rollout \"checkout\" is invalid: spec.strategy.canary.trafficRouting.nginx.stableIngress: Invalid value: \"checkout-internal\": ingress `checkout-internal` has no rules using service checkout-stable backend"
    );
}

/// `compare --ingress2gateway`: ingress2gateway weighs the canary against the weight total
/// even at 10 (5 of 10: 50 %), where ingress-nginx draws 5 in 100; the same load through
/// each is told apart. A header canary both translate alike is not.
#[test]
fn the_migration_check_finds_where_ingress2gateway_splits_otherwise() {
    use canarysim::scenario::migration::migration_check;
    let scenario = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name);
        canarysim::scenario::load_runnable(&path, &canarysim::scenario::Disk).unwrap()
    };
    let report = migration_check(&scenario("nginx-max-traffic-weight.yaml"), None);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let row = &report.rows[0];
    assert_eq!(row.ingress_nginx.configured, 0.05);
    assert_eq!(row.http_route.configured, 0.5);
    assert!((row.ingress_nginx.observed - 0.05).abs() < 0.005, "{row:?}");
    assert!((row.http_route.observed - 0.5).abs() < 0.01, "{row:?}");
    assert!(row.differ && row.configured_differ, "{row:?}");
    let report = migration_check(&scenario("nginx-header-canary.yaml"), None);
    assert_eq!(report.rows.len(), 6, "{report:?}");
    assert!(
        report
            .rows
            .iter()
            .all(|r| !r.differ && !r.configured_differ),
        "{report:?}"
    );
    assert!(report.notes.is_empty(), "{:?}", report.notes);
}

/// `check` loads an NGINX Rollout through ingress-nginx at the first host and path of its
/// stable Ingress that forwards to the stable Service, and judges each pause.
#[test]
fn check_loads_an_nginx_rollout_through_its_stable_ingress() {
    let path = fixture("manifests.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let written = canarysim::scenario::init::scenario(&[(
        canarysim::scenario::init::ManifestSource::File(path.display().to_string()),
        canarysim::model::yaml::load_str(path.to_str().unwrap(), &text, "default").unwrap(),
    )])
    .unwrap();
    assert!(
        written.text.contains("host: shop.example.com") && written.text.contains("path: /checkout"),
        "{}",
        written.text
    );
}

/// `maxTrafficWeight: 1000` makes every weight Argo computes one of 1000
/// (`weightutil.MaxTrafficWeight`): the stable side's is 1000 − 250, and ingress-nginx,
/// whose total is above 100, draws 250 in 1000.
#[test]
fn a_max_traffic_weight_above_100_scales_every_weight() {
    let mut w = world(|t| {
        t.replace(
            "      trafficRouting:\n        nginx:",
            "      trafficRouting:\n        maxTrafficWeight: 1000\n        nginx:",
        )
        .replace("- setWeight: 20", "- setWeight: 250")
        .replace("- setWeight: 50", "- setWeight: 500")
    });
    w.set_image(NS, "checkout", "checkout", "shop/checkout:v2")
        .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    let weights = &rollout_status(&w)["canary"]["weights"];
    assert_eq!(weights["canary"]["weight"], 250, "{weights}");
    assert_eq!(weights["stable"]["weight"], 750, "{weights}");
    let public = "checkout-checkout-public-canary";
    assert_eq!(canary_weight(&w, public).as_deref(), Some("250"));
    let table = canarysim::mesh::translate(&w.api);
    let r = canarysim::mesh::RequestMeta {
        origin: canarysim::mesh::Origin::Gateway("ingress-nginx/ingress-nginx-controller"),
        host: "shop.example.com",
        path: "/checkout",
        namespace: NS,
        ..Default::default()
    };
    let choice = table.route(&r).unwrap();
    assert_eq!(choice.clusters.total(), 1000);
}

/// A stable Ingress rule without `http` makes Argo's NGINX router dereference nil: the
/// controller panics at every reconcile, and the rollout goes nowhere.
#[test]
fn a_stable_ingress_rule_argo_cannot_read_stops_the_rollout() {
    let mut w = world(|t| {
        t.replace("  - host: cdn.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: static, port: {number: 80}}}}", "  - host: cdn.example.com")
    });
    w.set_image(NS, "checkout", "checkout", "shop/checkout:v2")
        .unwrap();
    w.advance(Duration::from_secs(30)).unwrap();
    assert_eq!(
        w.errors.values().next().map(String::as_str),
        Some(canarysim::controller::nginx::NIL_POINTER_PANIC)
    );
    assert_ne!(
        rollout_status(&w)["phase"],
        "Paused",
        "{}",
        rollout_status(&w)
    );
}

/// With `maxTrafficWeight: 10`, a step's `setWeight: 2` means 20 % to Argo: the scenario
/// `init` writes (and `check` plays) expects 20 %, which ingress-nginx's 2 in 100 fails.
#[test]
fn init_expects_a_steps_share_of_max_traffic_weight() {
    let path = fixture("manifests.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "      trafficRouting:\n        nginx:",
            "      trafficRouting:\n        maxTrafficWeight: 10\n        nginx:",
        )
        .replace("- setWeight: 20", "- setWeight: 2")
        .replace("- setWeight: 50", "- setWeight: 5");
    let written = canarysim::scenario::init::scenario(&[(
        canarysim::scenario::init::ManifestSource::File(path.display().to_string()),
        canarysim::model::yaml::load_str("manifests.yaml", &text, "default").unwrap(),
    )])
    .unwrap();
    assert!(
        written.text.contains("canary: 20%") && written.text.contains("canary: 50%"),
        "{}",
        written.text
    );
}

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

/// The canary's share of a load: of its units of randomisation, and of its requests.
fn canary_shares(load: &canarysim::outcome::LoadReport) -> (f64, f64) {
    load.versions
        .iter()
        .filter(|v| v.role == "canary")
        .fold((0.0, 0.0), |(u, r), v| (u + v.unit_share, r + v.share))
}

/// The bundled session-affinity scenario, read back: the weight is a share of new clients,
/// who stay where they were first sent while the weight moves; with the legacy canary
/// behaviour, clients drift to the stable version, each drawn again until a draw sends it
/// there: half of them draw the canary first, but it gets w/(1−w) of each client's
/// requests (1 of 20 at 50 %), and each of them sees both versions.
#[test]
fn session_affinity_makes_the_weight_a_share_of_new_clients_who_stay() {
    let report = run_scenario(&bundled("nginx-session-affinity.yaml"), None).unwrap();
    let loads = passed_loads(&report);
    assert_eq!(loads.len(), 4);
    assert!(loads.iter().all(|l| l.unit == SplitUnit::Client));
    let (fresh, staying, fresh_at_50, legacy) = (loads[0], loads[1], loads[2], loads[3]);
    assert_eq!(fresh.effective_n, 20_000);
    assert!((canary_shares(fresh).0 - 0.2).abs() < 0.01, "{fresh:?}");
    // The weight moved to 50 % under the same 2,000 clients; no client moved.
    assert!((canary_shares(staying).0 - 0.2).abs() < 0.03, "{staying:?}");
    assert_eq!(staying.clients_switched, Some(0));
    assert!((canary_shares(fresh_at_50).0 - 0.5).abs() < 0.01);
    let (clients, requests) = canary_shares(legacy);
    assert!((clients - 0.5).abs() < 0.01, "{legacy:?}");
    assert!((requests - 0.05).abs() < 0.005, "{legacy:?}");
    let switched = legacy.clients_switched.unwrap() as f64 / 20_000.0;
    assert!((switched - clients).abs() < 0.005, "{legacy:?}");
}

/// The bundled session-affinity scenario with `edit` applied to its text, run.
fn run_edited(edit: impl Fn(String) -> String) -> canarysim::outcome::RunReport {
    let text = edit(std::fs::read_to_string(bundled("nginx-session-affinity.yaml")).unwrap());
    let dir = crate::support::temp_dir();
    let path = dir.path().join("edited.yaml");
    std::fs::write(&path, text).unwrap();
    run_scenario(&path, None).unwrap()
}

/// Clients that arrive before the canary exists are pinned to the stable backend, and stay
/// there once the canary takes its weight.
#[test]
fn clients_pinned_before_the_canary_exists_never_reach_it() {
    let report = run_edited(|text| {
        let steps = "steps:\n  - wait: {until: healthy, timeout: 1m}\n  - set_image: {rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}\n  - load: {duration: 20s, rate: 1000, connections: 1000}\n  - expect: {set_weight: 20}\n";
        format!("{}{steps}", text.split("steps:\n  - wait").next().unwrap())
    });
    let load = passed_loads(&report)[0];
    assert_eq!(load.unit, SplitUnit::Client);
    assert_eq!(canary_shares(load), (0.0, 0.0), "{load:?}");
    // Per client, the configured split is of the clients' draws, all made before the
    // canary existed: nothing there says the router was wrong.
    let configured: f64 = load
        .configured
        .iter()
        .filter(|c| c.role == "canary")
        .map(|c| c.share)
        .sum();
    assert_eq!(configured, 0.0, "{load:?}");
    assert!(
        load.fit.as_ref().is_some_and(|f| f.p_value > 0.5),
        "{load:?}"
    );
}

/// A setWeight that changes nothing but the canary Ingress's weight (one replica: the
/// canary keeps its one pod) reaches ingress-nginx: an Ingress change alone makes a push.
#[test]
fn a_canary_weight_change_alone_reaches_ingress_nginx() {
    let report = run_edited(|text| {
        let text = text
            .replace("replicas: 4", "replicas: 1")
            .replace("nginx.ingress.kubernetes.io/affinity: cookie", "")
            .replace("pause: {duration: 30s}", "pause: {}")
            .replace("setWeight: 50", "setWeight: 60");
        let steps = "steps:\n  - wait: {until: healthy, timeout: 1m}\n  - set_image: {rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}\n  - wait: {until: paused, timeout: 1m}\n  - promote: rollouts-demo\n  - wait: {until: paused, timeout: 1m}\n  - expect: {set_weight: 60}\n  - wait: 2s\n  - load: {requests: 20000}\n  - expect_split: {canary: 60%, within: 2%}\n";
        format!("{}{steps}", text.split("steps:\n  - wait").next().unwrap())
    });
    let load = passed_loads(&report)[0];
    assert_eq!(load.unit, SplitUnit::Request);
    assert!((canary_shares(load).1 - 0.6).abs() < 0.02, "{load:?}");
}

/// Behind a stable Ingress with session affinity, `init` sends each pause's load from
/// 100,000 clients (five requests each): enough clients for a share within a point.
#[test]
fn init_sends_from_enough_clients_behind_session_affinity() {
    let path = fixture("manifests.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "    nginx.ingress.kubernetes.io/proxy-body-size: 8m",
        "    nginx.ingress.kubernetes.io/proxy-body-size: 8m\n    nginx.ingress.kubernetes.io/affinity: cookie",
    );
    let written = canarysim::scenario::init::scenario(&[(
        canarysim::scenario::init::ManifestSource::File(path.display().to_string()),
        canarysim::model::yaml::load_str("manifests.yaml", &text, "default").unwrap(),
    )])
    .unwrap();
    assert_eq!(written.text.matches("connections: 100000").count(), 2);
    assert_eq!(written.text.matches("requests: 500000").count(), 2);
}

/// Live mode refuses a load that meets session affinity, and only such a load: the
/// held-out manifests with `affinity: cookie` on the public Ingress only.
#[test]
fn only_a_load_through_a_location_with_affinity_meets_it() {
    use canarysim::load::{Amount, Traffic, Workload, meets_session_affinity};
    let w = world(|t| {
        t.replace(
            "    nginx.ingress.kubernetes.io/proxy-body-size: 8m",
            "    nginx.ingress.kubernetes.io/proxy-body-size: 8m\n    nginx.ingress.kubernetes.io/affinity: cookie",
        )
    });
    let load = |host: &str, path: &str| Workload {
        amount: Amount::Requests(1),
        namespace: NS.into(),
        traffic: Traffic {
            host: host.into(),
            path: path.into(),
            ..Traffic::default()
        },
        ..Workload::default()
    };
    assert!(meets_session_affinity(
        &w,
        &load("shop.example.com", "/checkout")
    ));
    assert!(!meets_session_affinity(&w, &load("checkout.internal", "/")));
}

/// A client is counted where its cookie sent it, answered or not: in the half second after
/// the canary's one pod crashes (before ingress-nginx's next sync drops it), every client
/// drawn to the canary fails, and still counts as the canary's. Counted by answers, they
/// would vanish from its share, and an over-weighted canary that failed its clients could
/// pass.
#[test]
fn clients_whose_every_request_failed_count_where_they_were_sent() {
    let report = run_edited(|text| {
        let steps = "steps:\n  - wait: {until: healthy, timeout: 1m}\n  - set_image: {rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}\n  - wait: {until: paused, timeout: 1m}\n  - wait: 2s\n  - fail_pods: {rollout: rollouts-demo, role: canary, count: 1}\n  - load: {duration: 500ms, rate: 20000, connections: 10000}\n  - expect_split: {canary: 20%, within: 2%, unit: client}\n";
        format!("{}{steps}", text.split("steps:\n  - wait").next().unwrap())
    });
    let load = passed_loads(&report)[0];
    assert_eq!(load.unit, SplitUnit::Client);
    assert_eq!(load.effective_n, 10_000);
    let canary = load.versions.iter().find(|v| v.role == "canary").unwrap();
    assert_eq!(canary.responses, 0, "{load:?}");
    assert_eq!(canary.clients, Some(load.upstream_failed), "{load:?}");
    assert!((canary_shares(load).0 - 0.2).abs() < 0.015, "{load:?}");
}
