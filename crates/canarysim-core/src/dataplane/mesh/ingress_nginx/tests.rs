//! Ingresses routed as ingress-nginx routes them: the class, the canary Ingress's weight
//! and total, headers, cookies, which canary counts, and locations.

use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::super::*;
use super::{CONTROLLER_NAME, CONTROLLER_NAMESPACE};
use crate::apiserver::ApiServer;
use crate::endpoints::Role;
use crate::endpoints::fixtures::*;
use crate::model::ingress::{ingress_class_kind, ingress_kind};
use crate::random::stream;

const NS: &str = "demo";
const HOST: &str = "rollouts-demo.local";
const PROXY: &str = "ingress-nginx/ingress-nginx-controller";

/// Two stable and two canary pods behind `demo-stable` and `demo-canary`, and the stable
/// Ingress of Argo's NGINX getting-started guide.
fn store() -> ApiServer {
    store_with_canary_pods(2)
}

/// [`store`] with this many canary pods.
fn store_with_canary_pods(canary_pods: usize) -> ApiServer {
    let mut api = ApiServer::new();
    rollout(&mut api, NS, "demo", "demo", "s1", "c1");
    pods(&mut api, NS, "demo", "s1", "demo:blue", 2);
    pods(&mut api, NS, "demo", "c1", "demo:yellow", canary_pods);
    for (name, hash) in [("demo-stable", "s1"), ("demo-canary", "c1")] {
        service(
            &mut api,
            NS,
            name,
            json!({"app": "demo", "rollouts-pod-template-hash": hash}),
        );
    }
    ingress(&mut api, "stable", json!({}), "demo-stable");
    api
}

fn ingress(api: &mut ApiServer, name: &str, annotations: Value, service: &str) {
    ingress_at(api, name, annotations, HOST, "/", service);
}

fn ingress_at(
    api: &mut ApiServer,
    name: &str,
    mut annotations: Value,
    host: &str,
    path: &str,
    service: &str,
) {
    annotations["kubernetes.io/ingress.class"] = json!("nginx");
    create(
        api,
        ingress_kind(),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": name, "namespace": NS, "annotations": annotations},
               "spec": {"rules": [{"host": host, "http": {"paths": [
                   {"path": path, "pathType": "Prefix",
                    "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}}),
    );
}

/// The canary annotations under ingress-nginx's prefix.
fn canary(pairs: &[(&str, &str)]) -> Value {
    let mut a = json!({"nginx.ingress.kubernetes.io/canary": "true"});
    for (k, v) in pairs {
        a[format!("nginx.ingress.kubernetes.io/{k}")] = json!(v);
    }
    a
}

fn request<'a>(path: &'a str, headers: &'a [(&'a str, &'a str)]) -> RequestMeta<'a> {
    RequestMeta {
        origin: Origin::Gateway(PROXY),
        host: HOST,
        path,
        headers,
        namespace: NS,
        ..RequestMeta::default()
    }
}

fn canary_percent(table: &RouteTable, r: &RequestMeta, n: usize) -> f64 {
    let mut rng = stream(7, "router");
    let mut state = LbState::new(table);
    let mut out: BTreeMap<Role, usize> = BTreeMap::new();
    for _ in 0..n {
        let s = table
            .serve(r, LbPolicy::RoundRobin, &mut rng, &mut state)
            .unwrap_or_else(|e| panic!("{e}"));
        *out.entry(table.endpoint(s.endpoint).unwrap().role)
            .or_default() += 1;
    }
    out.get(&Role::Canary).copied().unwrap_or(0) as f64 * 100.0 / n as f64
}

fn notes(table: &RouteTable) -> Vec<String> {
    table.notes().iter().map(ToString::to_string).collect()
}

#[test]
fn the_canary_ingress_weight_splits_requests_through_the_controller() {
    let mut api = store();
    ingress(
        &mut api,
        "canary",
        canary(&[("canary-weight", "20")]),
        "demo-canary",
    );
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    assert_eq!(table.gateway_for(HOST, NS), Some(PROXY));
    assert_eq!(PROXY, format!("{CONTROLLER_NAMESPACE}/{CONTROLLER_NAME}"));
    let share = canary_percent(&table, &request("/", &[]), 100_000);
    assert!((share - 20.0).abs() < 0.5, "canary share {share}");
}

#[test]
fn the_weight_total_counts_only_above_one_hundred() {
    // Argo's maxTrafficWeight 10 and setWeight 5: ingress-nginx draws 5 of 100.
    let mut api = store();
    let a = canary(&[("canary-weight", "5"), ("canary-weight-total", "10")]);
    ingress(&mut api, "canary", a, "demo-canary");
    let share = canary_percent(&translate(&api), &request("/", &[]), 100_000);
    assert!((share - 5.0).abs() < 0.4, "canary share {share}");
    let mut api = store();
    let a = canary(&[("canary-weight", "5"), ("canary-weight-total", "1000")]);
    ingress(&mut api, "canary", a, "demo-canary");
    let share = canary_percent(&translate(&api), &request("/", &[]), 100_000);
    assert!((share - 0.5).abs() < 0.15, "canary share {share}");
}

#[test]
fn a_header_decides_before_the_weight_and_other_values_fall_through() {
    let mut api = store();
    let a = canary(&[("canary-weight", "10"), ("canary-by-header", "X-Canary")]);
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    let share = |headers: &[(&str, &str)]| canary_percent(&table, &request("/", headers), 20_000);
    assert_eq!(share(&[("x-canary", "always")]), 100.0);
    assert_eq!(share(&[("X-Canary", "never")]), 0.0);
    // nginx drops a header with an underscore (`enable-underscores-in-headers: false`).
    let underscore = share(&[("x_canary", "always")]);
    assert!((underscore - 10.0).abs() < 1.0, "{underscore}");
    let other = share(&[("x-canary", "yes")]);
    assert!((other - 10.0).abs() < 1.0, "{other}");
    let without = share(&[]);
    assert!((without - 10.0).abs() < 1.0, "{without}");
}

#[test]
fn a_header_value_or_pattern_replaces_always_and_never() {
    let mut api = store();
    let a = canary(&[
        ("canary-by-header", "X-Canary"),
        ("canary-by-header-value", "v2"),
    ]);
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    let share = |v: &'static str| canary_percent(&table, &request("/", &[("x-canary", v)]), 2_000);
    assert_eq!(share("v2"), 100.0);
    assert_eq!(
        share("always"),
        0.0,
        "with a value, always is just another value"
    );
    let mut api = store();
    let a = canary(&[
        ("canary-by-header", "X-Canary"),
        ("canary-by-header-pattern", "^beta"),
    ]);
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    let share = |v: &'static str| canary_percent(&table, &request("/", &[("x-canary", v)]), 2_000);
    assert_eq!(share("beta-tester"), 100.0);
    assert_eq!(share("gamma"), 0.0);
}

#[test]
fn a_cookie_decides_after_the_header() {
    let mut api = store();
    let a = canary(&[
        ("canary-weight", "50"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-cookie", "canary"),
    ]);
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    let share = |h: &[(&str, &str)]| canary_percent(&table, &request("/", h), 2_000);
    assert_eq!(share(&[("cookie", "session=1; canary=always")]), 100.0);
    assert_eq!(share(&[("cookie", "canary=never")]), 0.0);
    assert_eq!(
        share(&[("x-canary", "always"), ("cookie", "canary=never")]),
        100.0,
        "the header first"
    );
}

#[test]
fn only_the_first_canary_of_a_backend_counts() {
    // Two canary Ingresses of one canary Service: one alternative backend, whose traffic
    // shaping is the first Ingress's (the controller creates each upstream once). Created
    // in the same second, they are listed by name, descending: canary-b first.
    // Of another Service: a second alternative, which balancer.lua never reads.
    for (second, noted) in [
        ("demo-canary", "canary settings are ignored"),
        ("demo-preview", "only the first counts"),
    ] {
        let mut api = store();
        service(
            &mut api,
            NS,
            "demo-preview",
            json!({"app": "demo", "rollouts-pod-template-hash": "c1"}),
        );
        let first = canary(&[("canary-weight", "10")]);
        ingress(&mut api, "canary-b", first, "demo-canary");
        ingress(
            &mut api,
            "canary-a",
            canary(&[("canary-weight", "90")]),
            second,
        );
        let table = translate(&api);
        let share = canary_percent(&table, &request("/", &[]), 50_000);
        assert!((share - 10.0).abs() < 0.6, "{second}: canary share {share}");
        assert!(
            notes(&table).iter().any(|n| n.contains(noted)),
            "{second}: {:?}",
            notes(&table)
        );
    }
}

#[test]
fn the_canary_belongs_to_the_backend_so_every_location_of_it_takes_it() {
    let mut api = store();
    ingress_at(
        &mut api,
        "api",
        json!({}),
        "api.example.com",
        "/v1",
        "demo-stable",
    );
    ingress(
        &mut api,
        "canary",
        canary(&[("canary-weight", "100")]),
        "demo-canary",
    );
    let table = translate(&api);
    let mut r = request("/v1/users", &[]);
    r.host = "api.example.com";
    assert_eq!(canary_percent(&table, &r, 1_000), 100.0);
}

#[test]
fn ingresses_of_another_class_or_none_are_not_served() {
    let mut api = store();
    create(
        &mut api,
        ingress_kind(),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "traefik", "namespace": NS},
               "spec": {"ingressClassName": "traefik", "rules": [{"host": "t.example.com",
                 "http": {"paths": [{"path": "/", "pathType": "Prefix",
                   "backend": {"service": {"name": "demo-stable", "port": {"number": 80}}}}]}}]}}),
    );
    create(
        &mut api,
        ingress_kind(),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "classless", "namespace": NS},
               "spec": {"rules": [{"host": "c.example.com",
                 "http": {"paths": [{"path": "/", "pathType": "Prefix",
                   "backend": {"service": {"name": "demo-stable", "port": {"number": 80}}}}]}}]}}),
    );
    let table = translate(&api);
    let n = notes(&table);
    assert!(
        n.iter()
            .any(|n| n.contains("\"traefik\" names no IngressClass")),
        "{n:?}"
    );
    assert!(n.iter().any(|n| n.contains("names no class")), "{n:?}");
    assert_eq!(table.gateway_for("t.example.com", NS), None);
    // A default IngressClass of ingress-nginx serves the Ingress that names none.
    create(
        &mut api,
        ingress_class_kind(),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
               "metadata": {"name": "nginx",
                 "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
               "spec": {"controller": "k8s.io/ingress-nginx"}}),
    );
    let table = translate(&api);
    assert_eq!(table.gateway_for("c.example.com", NS), Some(PROXY));
}

#[test]
fn an_exact_path_then_the_longest_prefix_and_prefix_is_by_segment() {
    let mut api = store();
    ingress_at(&mut api, "v2", json!({}), HOST, "/v2", "demo-canary");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/v2/x", &[]), 100), 100.0);
    assert_eq!(canary_percent(&table, &request("/v2", &[]), 100), 100.0);
    assert_eq!(canary_percent(&table, &request("/v20", &[]), 100), 0.0);
    assert_eq!(canary_percent(&table, &request("/", &[]), 100), 0.0);
}

#[test]
fn canary_settings_without_canary_true_leave_a_second_primary() {
    let mut api = store();
    let a = json!({"nginx.ingress.kubernetes.io/canary-weight": "50"});
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/", &[]), 1_000), 0.0);
    let n = notes(&table);
    assert!(
        n.iter().any(|n| n.contains("configured but not enabled")),
        "{n:?}"
    );
    assert!(n.iter().any(|n| n.contains("older Ingress's")), "{n:?}");
}

#[test]
fn a_canary_without_ready_pods_leaves_every_request_on_the_primary() {
    // balancer.lua keeps no balancer for a backend without endpoints, and a request whose
    // alternative has none stays on the primary: no 503s.
    let mut api = store_with_canary_pods(0);
    let a = canary(&[("canary-weight", "50"), ("canary-by-header", "X-Canary")]);
    ingress(&mut api, "canary", a, "demo-canary");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/", &[]), 1_000), 0.0);
    let always = [("x-canary", "always")];
    assert_eq!(canary_percent(&table, &request("/", &always), 1_000), 0.0);
}

#[test]
fn a_primary_without_ready_pods_fails_every_request_the_canarys_share_too() {
    // balancer.lua looks up the primary's balancer before any canary rule: none, no route
    // to the alternative either.
    let mut api = store();
    service(
        &mut api,
        NS,
        "demo-none",
        json!({"app": "demo", "rollouts-pod-template-hash": "gone"}),
    );
    ingress_at(
        &mut api,
        "empty",
        json!({}),
        "e.example.com",
        "/",
        "demo-none",
    );
    let a = canary(&[("canary-weight", "50")]);
    ingress_at(
        &mut api,
        "empty-canary",
        a,
        "e.example.com",
        "/",
        "demo-canary",
    );
    let table = translate(&api);
    let r = RequestMeta {
        host: "e.example.com",
        ..request("/", &[])
    };
    let (mut rng, mut state) = (stream(7, "router"), LbState::new(&table));
    let served = (0..100)
        .filter(|_| {
            table
                .serve(&r, LbPolicy::RoundRobin, &mut rng, &mut state)
                .is_ok()
        })
        .count();
    assert_eq!(served, 0);
}

#[test]
fn a_prefix_path_with_a_trailing_slash_does_not_take_the_path_without_it() {
    let mut api = store();
    ingress_at(&mut api, "v2", json!({}), HOST, "/v2/", "demo-canary");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/v2/x", &[]), 100), 100.0);
    assert_eq!(canary_percent(&table, &request("/v2/", &[]), 100), 100.0);
    assert_eq!(canary_percent(&table, &request("/v2", &[]), 100), 0.0);
}

#[test]
fn a_non_canary_ingress_that_names_the_canary_service_first_voids_the_canary() {
    // kubernetes/ingress-nginx#9458: a preview Ingress to the canary Service, older than
    // the canary Ingress, makes the upstream without traffic shaping: weight 0.
    let mut api = store();
    ingress_at(
        &mut api,
        "preview",
        json!({}),
        "preview.example.com",
        "/",
        "demo-canary",
    );
    ingress(
        &mut api,
        "canary",
        canary(&[("canary-weight", "20")]),
        "demo-canary",
    );
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/", &[]), 5_000), 0.0);
    assert!(
        notes(&table).iter().any(|n| n.contains("never read")),
        "{:?}",
        notes(&table)
    );
}

/// The stickiness of the location's routes, as (primary pinned, canary pinned, cookie).
fn stickiness(table: &RouteTable) -> Option<(bool, bool, String)> {
    let choice = table.route(&request("/", &[])).unwrap();
    choice.sticky.map(|s| {
        let cookie = s.primary.as_ref().map(|b| b.cookie.to_string());
        (
            s.primary.is_some(),
            s.canary.is_some(),
            cookie.unwrap_or_default(),
        )
    })
}

#[test]
fn a_cookie_affinity_pins_the_primary_and_the_canary_unless_the_canary_says_legacy() {
    let affinity = |pairs: &[(&str, &str)]| {
        let mut a = json!({});
        for (k, v) in pairs {
            a[format!("nginx.ingress.kubernetes.io/{k}")] = json!(v);
        }
        a
    };
    let with = |stable: Value, canary_extra: &[(&str, &str)]| {
        let mut api = store();
        api.delete(ingress_kind(), NS, "stable").unwrap();
        ingress(&mut api, "stable", stable, "demo-stable");
        let mut pairs = vec![("canary-weight", "20")];
        pairs.extend_from_slice(canary_extra);
        ingress(&mut api, "canary", canary(&pairs), "demo-canary");
        translate(&api)
    };
    // No affinity: nothing pinned.
    assert_eq!(stickiness(&with(json!({}), &[])), None);
    // The controller's default cookie; the canary takes the primary's affinity.
    let table = with(affinity(&[("affinity", "cookie")]), &[]);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    assert_eq!(
        stickiness(&table),
        Some((true, true, "INGRESSCOOKIE".into()))
    );
    // Its own name; legacy on the canary Ingress: only the primary pins.
    let table = with(
        affinity(&[("affinity", "cookie"), ("session-cookie-name", "route")]),
        &[("affinity-canary-behavior", "legacy")],
    );
    assert_eq!(stickiness(&table), Some((true, false, "route".into())));
    // Legacy on the primary Ingress does nothing: the merge reads the canary Ingress's.
    let table = with(
        affinity(&[
            ("affinity", "cookie"),
            ("affinity-canary-behavior", "legacy"),
        ]),
        &[],
    );
    assert_eq!(stickiness(&table).map(|s| s.1), Some(true));
    // A value the validation refuses is read as absent, and noted.
    let table = with(affinity(&[("affinity", "Cookie")]), &[]);
    assert_eq!(stickiness(&table), None);
    assert!(
        notes(&table).iter().any(|n| n.contains("is not cookie")),
        "{:?}",
        notes(&table)
    );
}

#[test]
fn a_client_pinned_to_a_backend_stays_there_before_any_canary_rule() {
    let mut api = store();
    api.delete(ingress_kind(), NS, "stable").unwrap();
    ingress(
        &mut api,
        "stable",
        json!({"nginx.ingress.kubernetes.io/affinity": "cookie"}),
        "demo-stable",
    );
    ingress(
        &mut api,
        "canary",
        canary(&[("canary-weight", "20"), ("canary-by-header", "X-Canary")]),
        "demo-canary",
    );
    let table = translate(&api);
    // The header's route sends to the canary; a client whose cookie names the primary is
    // pinned there first (balancer.lua: is_affinitized before the traffic shaping).
    let always = table
        .route(&request("/", &[("x-canary", "always")]))
        .unwrap();
    let sticky = always.sticky.expect("the location's affinity");
    let (primary, canary) = (
        sticky.primary.clone().unwrap(),
        sticky.canary.clone().unwrap(),
    );
    let mut jar = CookieJar::new();
    assert_eq!(sticky.pinned(&jar), None, "no cookie: the routes decide");
    sticky.remember(primary.cluster, &mut jar);
    assert_eq!(sticky.pinned(&jar), Some(primary.cluster));
    // A request sent to the canary anyway (say the primary's cookie was not yet set)
    // leaves the cookie: the balanced mode hashes any cookie to a pod of its own.
    sticky.remember(canary.cluster, &mut jar);
    assert_eq!(jar.len(), 1, "{jar:?}");
    assert_eq!(sticky.pinned(&jar), Some(primary.cluster));
    // The persistent mode replaces a cookie it cannot place: the client moves.
    let persistent = Stickiness {
        primary: Some(StickyBackend {
            persistent: true,
            ..primary.clone()
        }),
        canary: Some(StickyBackend {
            persistent: true,
            ..canary.clone()
        }),
    };
    persistent.remember(canary.cluster, &mut jar);
    assert_eq!(jar.len(), 1, "{jar:?}");
    assert_eq!(persistent.pinned(&jar), Some(canary.cluster));
    // A cookie of another backend (a backend gone since) pins nothing.
    let stale: CookieJar = vec![(primary.cookie.clone(), "demo/gone:80".into())];
    assert_eq!(sticky.pinned(&stale), None);
}

#[test]
fn the_affinity_is_trimmed_has_a_mode_and_sets_its_cookie_only_where_asked() {
    let mut api = store();
    api.delete(ingress_kind(), NS, "stable").unwrap();
    ingress(
        &mut api,
        "stable",
        json!({"nginx.ingress.kubernetes.io/affinity": " cookie ",
               "nginx.ingress.kubernetes.io/affinity-mode": "persistent"}),
        "demo-stable",
    );
    // A newer Ingress naming the same Service at another path, without affinity.
    ingress_at(&mut api, "api", json!({}), HOST, "/api", "demo-stable");
    let table = translate(&api);
    assert!(table.notes().is_empty(), "{:?}", notes(&table));
    let at = |path: &str| {
        let choice = table.route(&request(path, &[])).unwrap();
        choice.sticky.and_then(|s| s.primary.clone())
    };
    let root = at("/").unwrap();
    assert!(root.persistent && root.sets_cookie, "{root:?}");
    // The upstream's balancer is sticky everywhere, but sets its cookie only where an
    // Ingress asked for the affinity (sticky.lua's should_set_cookie): elsewhere a client
    // gets no cookie, and is drawn per request.
    assert_eq!(at("/api/v1"), None);
}

/// `use-regex: "true"`: the path is `~* "^path"`, case-insensitive and open-ended.
#[test]
fn a_use_regex_path_is_a_case_insensitive_regex_from_the_start() {
    let mut api = store();
    regex_ingress(&mut api, "/api/v[0-9]+");
    let table = translate(&api);
    let at = at_api_host;
    assert_eq!(canary_percent(&table, &at("/API/v2/orders"), 100), 100.0);
    assert_eq!(canary_percent(&table, &at("/api/v10"), 100), 100.0);
    assert!(table.route(&at("/api/vx")).is_err(), "no location matches");
    // Routed, and noted: ingress-nginx's admission refuses a regex path of type Prefix.
    let notes = notes(&table);
    assert!(notes.iter().all(|n| !n.contains("use-regex")), "{notes:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("path \"/api/v[0-9]+\" cannot be used with pathType Prefix")),
        "{notes:?}"
    );
}

/// One regex Ingress makes every location of its host a regex, tried longest first: the
/// plain `/v2` then takes `/v20` too, and `/v[0-9]` (6 characters) is tried before `/v2`.
#[test]
fn one_regex_ingress_makes_every_location_of_its_host_a_regex_tried_longest_first() {
    let mut api = store();
    ingress_at(&mut api, "v2", json!({}), HOST, "/v2", "demo-canary");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/v20", &[]), 100), 0.0);
    let rewrite = json!({"nginx.ingress.kubernetes.io/rewrite-target": "/$1"});
    ingress_at(&mut api, "rewrite", rewrite, HOST, "/z(.*)", "demo-stable");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/v20", &[]), 100), 100.0);
    assert_eq!(canary_percent(&table, &request("/V2", &[]), 100), 100.0);
    let re = json!({"nginx.ingress.kubernetes.io/use-regex": "true"});
    ingress_at(&mut api, "digits", re, HOST, "/v[0-9]", "demo-stable");
    let table = translate(&api);
    assert_eq!(canary_percent(&table, &request("/v2/x", &[]), 100), 0.0);
    // Another host keeps nginx's prefix locations.
    ingress_at(
        &mut api,
        "other",
        json!({}),
        "other.example.com",
        "/v2",
        "demo-canary",
    );
    let table = translate(&api);
    let other = RequestMeta {
        host: "other.example.com",
        ..request("/v20", &[])
    };
    assert!(
        table.route(&other).is_err(),
        "/v2 is a prefix by segment there"
    );
}

/// A path canarysim's regular expressions refuse (a look-behind, which PCRE takes) is noted
/// and matched as a prefix.
#[test]
fn a_regex_path_canarysim_cannot_compile_is_noted_and_matched_as_a_prefix() {
    let mut api = store();
    let re = json!({"nginx.ingress.kubernetes.io/use-regex": "true"});
    ingress_at(&mut api, "re", re, HOST, "/(?<=a)b", "demo-canary");
    let table = translate(&api);
    assert!(
        notes(&table).iter().any(|n| n.contains("does not compile")),
        "{:?}",
        notes(&table)
    );
}

/// As nginx writes them: `~* "^/a|/b"` anchors only its first branch; a `rewrite-target`
/// the annotation parser refuses is empty, so it makes no regex host.
#[test]
fn a_regex_path_is_searched_as_nginx_writes_it_and_a_refused_rewrite_target_is_none() {
    let mut api = store();
    regex_ingress(&mut api, "/a|/b");
    let refused = json!({"nginx.ingress.kubernetes.io/rewrite-target": "/$1?x=y"});
    ingress_at(&mut api, "v2", refused, HOST, "/v2", "demo-canary");
    let table = translate(&api);
    let at = at_api_host;
    assert_eq!(canary_percent(&table, &at("/x/b"), 10), 100.0);
    assert!(
        table.route(&at("/x/a")).is_err(),
        "the first branch is anchored"
    );
    assert_eq!(canary_percent(&table, &request("/v20", &[]), 10), 0.0);
}

/// An Ingress with `use-regex: "true"` on `api.example.com`, its path to `demo-canary`.
fn regex_ingress(api: &mut ApiServer, path: &str) {
    let re = json!({"nginx.ingress.kubernetes.io/use-regex": "true"});
    ingress_at(api, "re", re, "api.example.com", path, "demo-canary");
}

/// A request to `api.example.com`.
fn at_api_host(path: &str) -> RequestMeta<'_> {
    RequestMeta {
        host: "api.example.com",
        ..request(path, &[])
    }
}
