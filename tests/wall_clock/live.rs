//! Live mode on real loopback sockets: `canarysim serve`'s world answered through its
//! router while the steps play on a scaled wall clock. Bounded: the walkthrough at 20× lasts
//! about 13 s; every server is on 127.0.0.1 and stops with the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use canarysim::live::{ServeOptions, serve};

use crate::support;

use support::Shared;

/// One GET through the router with a Host header; the version that answered (None: not 200).
fn version_via(address: &str, host: &str) -> Option<String> {
    let mut s = TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    if !response.starts_with("HTTP/1.1 200") {
        return None;
    }
    let at = response.find("\"version\":\"")? + "\"version\":\"".len();
    Some(response[at..].split('"').next()?.to_string())
}

#[test]
fn serve_shows_blue_then_a_mix_then_yellow_and_closes_its_port_on_stop() {
    let plan = canarysim::scenario::load(
        std::path::Path::new(canarysim::cli::DEFAULT_SCENARIO),
        &canarysim::cli::EMBEDDED,
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let out = Shared::default();
    let (stop_serving, mut writer) = (stop.clone(), out.clone());
    let server = std::thread::spawn(move || {
        let options = ServeOptions {
            seed: None,
            hold: false,
            time_scale: 20.0,
            api: None,
        };
        serve(&plan, options, stop_serving, &mut writer).unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let address = loop {
        if let Some(line) = out
            .text()
            .lines()
            .find(|l| l.starts_with("router listening on"))
        {
            break line
                .trim_start_matches("router listening on http://")
                .to_string();
        }
        assert!(Instant::now() < deadline, "no address printed");
        std::thread::sleep(Duration::from_millis(10));
    };
    // Samples of 10 requests, until the steps are done: what each sample saw.
    let mut phases: Vec<&'static str> = Vec::new();
    while !out.text().contains("all steps done") {
        assert!(
            Instant::now() < deadline,
            "the walkthrough did not finish: {}",
            out.text()
        );
        let seen: Vec<String> = (0..10)
            .filter_map(|_| version_via(&address, "rollouts-demo.local"))
            .collect();
        let phase = match (
            seen.iter().any(|v| v == "blue"),
            seen.iter().any(|v| v == "yellow"),
        ) {
            (true, false) => "blue",
            (true, true) => "mix",
            (false, true) => "yellow",
            (false, false) => continue,
        };
        if phases.last() != Some(&phase) {
            phases.push(phase);
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    assert_eq!(phases.first(), Some(&"blue"), "{phases:?}\n{}", out.text());
    assert!(phases.contains(&"mix"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"yellow"), "{phases:?}");
    let order: Vec<usize> = ["blue", "mix", "yellow"]
        .iter()
        .map(|p| phases.iter().position(|x| x == p).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{phases:?}");
    // The final state is served until stopped.
    assert_eq!(
        version_via(&address, "rollouts-demo.local").as_deref(),
        Some("yellow")
    );
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    assert!(out.text().contains("stopped; every port closed"));
    assert!(
        TcpStream::connect(&address).is_err(),
        "the router's port is closed after stop"
    );
}

/// A short rollout to 20 %, its load sent as real requests through the live router.
fn small_live_scenario() -> support::TempFile {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let m = |f: &str| manifests.join(f).display().to_string();
    let text = format!(
        r#"name: live-small
seed: 1
namespace: my-demo
manifests:
  - file: {rollout}
  - file: {services}
  - file: {gateway}
  - file: {vs}
cluster: {{pod_ready_after: 5s, push_delay: 100ms}}
traffic: {{host: rollouts-demo.local, port: 80, connections: 8}}
steps:
  - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}
  - apply: {update}
  - wait: {{until: paused, timeout: 5m}}
  - wait: 1s
  - load: {{requests: 4000}}
  - expect_split: {{canary: 20%, within: 3%, confidence: 99.9%}}
"#,
        rollout = m("seed-004-rollout.yaml"),
        services = m("seed-004-services.yaml"),
        gateway = m("seed-004-gateway.yaml"),
        vs = m("seed-004-virtualsvc.yaml"),
        update = m("seed-004-rollout-update.yaml"),
    );
    support::write_temp("live-small.yaml", &text)
}

#[test]
fn run_live_sends_the_load_as_real_requests_and_says_so() {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let path = small_live_scenario();
    let r = live_report(&path);
    assert_eq!(r["mode"], "live (time scale 60)");
    let load = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["load"].as_object())
        .unwrap();
    assert!(
        load["path"].as_str().unwrap().contains("live router"),
        "{load:?}"
    );
    assert_eq!(load["sent"], 4000);
    assert_eq!(load["answered"], 4000, "every request answered by a pod");
    // Every answer came from a pod the world knows, by name.
    let pods = load["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 5, "4 stable pods and 1 canary: {pods:?}");
    assert!(pods.iter().all(|p| p["role"] != "other"), "{pods:?}");
    // Simulated runs do not name a mode.
    let (_, sim, _) = execute(Cli::parse_from([
        "canarysim",
        "run",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert!(!sim.contains("\"mode\""));
}

#[test]
fn run_live_without_a_mesh_pins_each_connection_to_one_pod() {
    let original = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/no-mesh-keepalive.yaml"),
    )
    .unwrap();
    // The scenario's manifests and cluster, with one short keep-alive load.
    let head = &original[..original.find("\nsteps:").unwrap() + 1];
    let text = format!(
        "{head}steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 1m}}
  - load: {{requests: 3000, connections: 6, keepalive: true}}
  - expect_split: {{canary: 20%, within: 1%, confidence: 99%, verdict: fail, unit: connection, effective_n: 6}}
"
    );
    let path = support::write_temp("plain.yaml", &text);
    let r = live_report(&path);
    let load = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["load"].as_object())
        .unwrap();
    assert!(
        load["path"].as_str().unwrap().starts_with("kube-proxy"),
        "{load:?}"
    );
    assert_eq!(load["unit"], "connection");
    assert_eq!(
        load["effective_n"], 6,
        "six keep-alive connections, six draws"
    );
    // Each connection stayed on one pod: at most six pods answered.
    let answering = load["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["responses"].as_u64().unwrap() > 0)
        .count();
    assert!((1..=6).contains(&answering), "{answering}");
}

/// Runs a scenario file live at 60×; its JSON report (the run must pass).
fn live_report(path: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = run_live_at_60(path, &["--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap()
}

/// `canarysim run PATH --live --time-scale 60 EXTRA…`: exit code, stdout, stderr.
fn run_live_at_60(path: &std::path::Path, extra: &[&str]) -> (u8, String, String) {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let mut argv = vec![
        "canarysim",
        "run",
        path.to_str().unwrap(),
        "--live",
        "--time-scale",
        "60",
    ];
    argv.extend_from_slice(extra);
    execute(Cli::parse_from(argv))
}

/// Runs a scenario live at 60× and returns its JSON report's load steps.
fn live_loads(name: &str, text: &str) -> Vec<serde_json::Value> {
    let path = support::write_temp(name, text);
    let r = live_report(&path);
    r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.get("load").cloned())
        .collect()
}

/// The walkthrough's manifests and a canary at 20 %, then `steps` (YAML list items).
fn seed_004_at_20_percent(backends: &str, extra_manifest: &str, steps: &str) -> String {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let m = |f: &str| manifests.join(f).display().to_string();
    format!(
        r#"name: live-policy
seed: 5
namespace: my-demo
manifests:
  - file: {rollout}
  - file: {services}
  - file: {gateway}
  - file: {vs}
{extra_manifest}
cluster:
  backends:
{backends}
traffic: {{host: rollouts-demo.local, connections: 8}}
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 1m}}
  - wait: 1s
{steps}"#,
        rollout = m("seed-004-rollout.yaml"),
        services = m("seed-004-services.yaml"),
        gateway = m("seed-004-gateway.yaml"),
        vs = m("seed-004-virtualsvc.yaml"),
    )
}

/// The VirtualService of the walkthrough at 80/20 with `policy` (YAML keys) on its route.
fn route_with(policy: &str) -> String {
    format!(
        r#"  - apply:
      inline: |
        apiVersion: networking.istio.io/v1alpha3
        kind: VirtualService
        metadata: {{name: rollouts-demo-vsvc}}
        spec:
          gateways: [rollouts-demo-gateway]
          hosts: [rollouts-demo.local]
          http:
          - name: primary
            {policy}
            route:
            - {{destination: {{host: rollouts-demo-stable}}, weight: 80}}
            - {{destination: {{host: rollouts-demo-canary}}, weight: 20}}
  - wait: 1s
"#
    )
}

fn count(load: &serde_json::Value, field: &str) -> u64 {
    load[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {load}"))
}

/// What the pods themselves received and failed, by role.
fn pods_view(load: &serde_json::Value, role: &str) -> (u64, u64) {
    load["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == role)
        .fold((0, 0), |(n, e), p| {
            (
                n + p["responses"].as_u64().unwrap(),
                e + p["errors"].as_u64().unwrap(),
            )
        })
}

fn version_share(load: &serde_json::Value, role: &str) -> (u64, u64) {
    load["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["role"] == role)
        .fold((0, 0), |(n, e), v| {
            (
                n + v["responses"].as_u64().unwrap(),
                e + v["errors"].as_u64().unwrap(),
            )
        })
}

#[test]
fn the_live_router_retries_aborts_and_times_out_as_the_route_says() {
    // The canary answers every request with 503 after 30 ms.
    let backends =
        "    argoproj/rollouts-demo:yellow: {latency: 30ms, error_rate: 100%, error_status: 503}";
    let steps = [
        // Istio's default: 2 retries on 503, each to another host.
        "  - load: {requests: 2000}\n".to_string(),
        route_with("retries: {attempts: 0}\n            fault: {abort: {percentage: {value: 50}, httpStatus: 418}}"),
        "  - load: {requests: 2000}\n".to_string(),
        route_with("retries: {attempts: 0}\n            timeout: 10ms"),
        "  - load: {requests: 2000}\n".to_string(),
    ]
    .concat()
    .replace("\\n", "\n");
    let loads = live_loads("policy.yaml", &seed_004_at_20_percent(backends, "", &steps));
    assert_eq!(loads.len(), 3);

    // Istio's default retries go to another host of the same cluster where there is one;
    // the canary cluster has one pod, so each canary request is tried three times there,
    // and the clients see its last 503. The pods' view counts every attempt.
    let default = &loads[0];
    let (canary_answers, canary_errors) = version_share(default, "canary");
    assert_eq!(canary_answers, canary_errors, "{default}");
    assert!((300..500).contains(&canary_answers), "{canary_answers}");
    assert_eq!(count(default, "retries"), 2 * canary_answers, "{default}");
    let (canary_received, canary_failed) = pods_view(default, "canary");
    assert_eq!(
        (canary_received, canary_failed),
        (3 * canary_answers, 3 * canary_answers)
    );
    assert_eq!(count(default, "answered"), 2000);

    // The fault filter answers half with 418 before routing; nothing is retried.
    let faulted = &loads[1];
    let aborted = count(faulted, "fault_aborted");
    assert!((880..1120).contains(&aborted), "{aborted}");
    assert_eq!(count(faulted, "retries"), 0);
    assert_eq!(count(faulted, "answered") + aborted, 2000);
    let (canary_answers, canary_errors) = version_share(faulted, "canary");
    assert_eq!(
        canary_answers, canary_errors,
        "the canary's 503s reach the clients"
    );

    // A 10 ms route timeout against a 30 ms canary: every canary request ends as 504,
    // counted against the canary (the pod it went to), as the simulation counts it.
    // (A stable answer, due in 1 ms, may also miss 10 ms on a loaded machine: it is then
    // counted against the stable version.)
    let timed = &loads[2];
    let (canary_answers, canary_errors) = version_share(timed, "canary");
    let (_, stable_errors) = version_share(timed, "stable");
    assert_eq!(canary_answers, canary_errors);
    // Under heavy load a stable request may also fail in another way (seen once in CI
    // beside a fuzzer: 961 errors, 960 timeouts), so the timeouts are bounded, not equal.
    let timed_out = count(timed, "timed_out");
    assert!(
        (canary_errors..=canary_errors + stable_errors).contains(&timed_out),
        "{timed}"
    );
    assert!((300..500).contains(&canary_answers), "{canary_answers}");
}

#[test]
fn the_live_router_ejects_an_outlier_and_answers_no_healthy_upstream() {
    let backends = "    argoproj/rollouts-demo:yellow: {error_rate: 100%}";
    let rule = r#"  - inline: |
      apiVersion: networking.istio.io/v1beta1
      kind: DestinationRule
      metadata: {name: rollouts-demo-canary}
      spec:
        host: rollouts-demo-canary
        trafficPolicy:
          outlierDetection: {consecutive5xxErrors: 3, interval: 10s, baseEjectionTime: 10m, maxEjectionPercent: 100}"#;
    let steps = route_with("retries: {attempts: 0}") + "  - load: {requests: 2000}\n";
    let steps = steps.replace("\\n", "\n");
    let loads = live_loads(
        "outlier.yaml",
        &seed_004_at_20_percent(backends, rule, &steps),
    );
    let load = &loads[0];
    // Three 500s in a row eject the only canary pod for ten minutes: the canary answers
    // three requests (and those already on their way to it: 8 connections send at once),
    // and the rest routed to it find no healthy upstream.
    let (canary_answers, _) = version_share(load, "canary");
    assert!((3..=10).contains(&canary_answers), "{load}");
    let none = count(load, "no_healthy_upstream");
    assert!((300..500).contains(&none), "{none}");
    assert_eq!(count(load, "answered") + none, 2000);
}

#[test]
fn tls_and_tcp_routes_live_split_connections_by_sni_and_port() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Driven by events, not by the machine's speed: the rollout's second pause (30 s) would
    // end while a slow machine is still sending its 8,000 connections (a live load's time
    // is wall time), and the split would change under the load. Here it waits for a
    // promote instead.
    let rollout =
        std::fs::read_to_string(root.join("scenarios/manifests/seed-003-multi-vs-rollout.yaml"))
            .unwrap()
            .replace("- pause: {duration: 30s}", "- pause: {}");
    let rollout = support::write_temp("tls-tcp-rollout.yaml", &rollout);
    let text = std::fs::read_to_string(root.join("scenarios/tls-and-tcp-routes.yaml"))
        .unwrap()
        .replace(
            "file: manifests/seed-003-multi-vs-rollout.yaml",
            &format!("file: {}", rollout.display()),
        )
        .replace(
            "file: manifests/",
            &format!("file: {}/scenarios/manifests/", root.display()),
        )
        .replace(
            "  - wait: {until: healthy, timeout: 5m}",
            "  - promote: rollouts-demo\n  - wait: {until: healthy, timeout: 5m}",
        );
    assert!(text.contains("  - promote: rollouts-demo\n  - wait: {until: healthy"));
    let loads = live_loads("tls-tcp.yaml", &text);
    assert_eq!(loads.len(), 5);
    for load in &loads {
        assert_eq!(load["unit"], "connection", "{load}");
        assert_eq!(count(load, "answered"), count(load, "sent"), "{load}");
        // One request per connection: a connection is a draw.
        assert_eq!(count(load, "effective_n"), count(load, "sent"), "{load}");
    }
    // After the rollout, every TCP connection reaches the new stable.
    let (canary, _) = version_share(&loads[4], "canary");
    assert_eq!(canary, 0);
}

/// Serves a scenario whose last step reaches the 20 % pause (the VirtualService is written
/// then; its push lands 100 ms later, after the steps), then sends 6,000 requests through
/// the router with `canarysim load` and judges them: the router must serve the pushed
/// table, not the one in force when the steps ended.
fn served_split_after_the_last_step(api: bool) {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let m = |f: &str| manifests.join(f).display().to_string();
    let scenario = support::write_temp(
        &format!("serve-ends-at-pause-{api}.yaml"),
        &format!(
            r#"name: serve-ends-at-pause
seed: 3
namespace: my-demo
manifests:
  - file: {}
  - file: {}
  - file: {}
  - file: {}
cluster: {{pod_ready_after: 1s}}
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 1m}}
"#,
            m("seed-004-rollout.yaml"),
            m("seed-004-services.yaml"),
            m("seed-004-gateway.yaml"),
            m("seed-004-virtualsvc.yaml"),
        ),
    );
    let plan = canarysim::scenario::load(&scenario, &canarysim::scenario::Disk).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let out = Shared::default();
    let (stop_serving, mut writer) = (stop.clone(), out.clone());
    let server = std::thread::spawn(move || {
        let options = ServeOptions {
            seed: None,
            hold: false,
            time_scale: 10.0,
            api: api.then(canarysim::live::ApiOptions::default),
        };
        serve(&plan, options, stop_serving, &mut writer).unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    while !out.text().contains("all steps done") {
        assert!(
            Instant::now() < deadline,
            "the steps did not end: {}",
            out.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let address = out
        .text()
        .lines()
        .find_map(|l| {
            l.strip_prefix("router listening on http://")
                .map(str::to_string)
        })
        .unwrap();
    // Wait (bounded) for the first yellow answer: the push has landed.
    while version_via(&address, "rollouts-demo.local").as_deref() != Some("yellow") {
        assert!(
            Instant::now() < deadline,
            "yellow never answered: {}",
            out.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let argv = [
        "canarysim",
        "load",
        &format!("http://{address}/"),
        "--host",
        "rollouts-demo.local",
        "-n",
        "6000",
        "-c",
        "8",
        "--quiet",
        "--expect",
        "yellow=20%",
        "--within",
        "4",
        "--format",
        "json",
    ];
    use clap::Parser;
    let (code, json, err) = canarysim::cli::execute(canarysim::cli::Cli::parse_from(argv));
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    let r: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(r["unit"], "request", "{json}");
    assert_eq!(r["verdict"]["outcome"], "pass", "{json}\n{}", out.text());
    assert_eq!(code, 0);
}

#[test]
fn serve_keeps_the_world_running_after_the_last_step() {
    served_split_after_the_last_step(false);
}

#[test]
fn serve_with_the_api_keeps_the_world_running_after_the_last_step() {
    served_split_after_the_last_step(true);
}

/// The live router and load keep no cookies: a load through an Ingress with session
/// affinity is refused live, saying why, rather than judged per request.
#[test]
fn run_live_refuses_a_load_through_session_affinity() {
    let bundled = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/nginx-session-affinity.yaml");
    let text = std::fs::read_to_string(bundled).unwrap();
    let first_load = text.split("  # 2,000 users for 40 s").next().unwrap();
    let path = support::write_temp("affinity-live.yaml", first_load);
    let (code, out, err) = run_live_at_60(&path, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("session affinity") && out.contains("run the scenario without --live"),
        "{out}"
    );
}
