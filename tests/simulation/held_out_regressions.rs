//! Defects found by the held-out hostile inputs of issue 34 (`tests/held-out/`, run by
//! `.ci/hostile-inputs`), each locked at its smallest input: what hung, ran away with memory
//! or passed in silence is refused at its place now. In-process, as the binary runs; every
//! run has a watchdog, so a hang fails the test instead of stalling the suite.

use crate::support;

use canarysim::cli::{Cli, execute};
use clap::Parser;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

/// `canarysim ARGS…` in-process; a run that has not answered after 120 s fails (each of
/// these answers in well under a second once fixed: the bound is a watchdog, not a timing).
fn canarysim(args: &[&str]) -> (u8, String, String) {
    let argv: Vec<String> = std::iter::once("canarysim")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let line = argv.join(" ");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(execute(Cli::parse_from(argv)));
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(answer) => answer,
        Err(RecvTimeoutError::Timeout) => panic!("hung for 120 s: {line}"),
        Err(RecvTimeoutError::Disconnected) => panic!("panicked: {line}"),
    }
}

/// The bundled walkthrough's world (absolute paths: the scenario is written elsewhere).
fn world(traffic: &str) -> String {
    let m = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    format!(
        "name: held-out\nnamespace: my-demo\nmanifests:\n  - file: {m}/seed-004-rollout.yaml\n  - file: {m}/seed-004-services.yaml\n  - file: {m}/seed-004-gateway.yaml\n  - file: {m}/seed-004-virtualsvc.yaml\n{traffic}\n"
    )
}

const BACKGROUND: &str = "traffic: {host: rollouts-demo.local, background: {rate: 10000}}";

#[test]
fn background_traffic_beyond_the_request_budget_is_refused_before_the_wait() {
    // Go's longest wait at 10,000 background requests per second: 9.2e13 requests, which
    // ran for hours; a wait-until's timeout is bounded the same way (pods that never turn
    // Ready kept it waiting the whole 292 years).
    let cases = [
        (
            "  - wait: 2562047h47m16.854775807s\n",
            "1  t+0s      wait 2562047h47m16s",
            "refused: traffic.background at 10000 requests per second would send about 92233720368548 simulated requests in the 2562047h47m16s this step may wait, more than the request budget of 100000000 per step",
        ),
        (
            "  - wait: {until: healthy, timeout: 3h}\n",
            "1  t+0s      wait until Healthy",
            "would send about 108000000 simulated requests in the 3h this step may wait",
        ),
    ];
    for (step, header, refusal) in cases {
        let file = support::write_temp(
            "background.yaml",
            &format!("{}steps:\n{step}", world(BACKGROUND)),
        );
        let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
        assert_eq!(code, 1, "{step}: {out}{err}");
        let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
        let header = header.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(out.contains(&format!("✖ {header}")), "{step}: {out}");
        assert!(out.contains(refusal), "{step}: {out}");
        assert!(out.contains("`canarysim run --request-budget"), "{out}");
    }
}

#[test]
fn background_traffic_within_the_budget_runs_and_the_budget_flag_bounds_it() {
    // 100 requests per second for 2 hours: 720,000 background requests.
    let traffic = "traffic: {host: rollouts-demo.local, background: {rate: 100}}";
    let file = support::write_temp(
        "background.yaml",
        &format!("{}steps:\n  - wait: 2h\n", world(traffic)),
    );
    let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) =
        canarysim(&["run", file.to_str().unwrap(), "--request-budget", "500000"]);
    assert_eq!(code, 1, "{out}{err}");
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        out.contains("would send about 720000 simulated requests in the 2h"),
        "{out}"
    );
}

/// A Rollout of 4 replicas with `STEP` first, behind the walkthrough's Services.
fn canary_scale(step: &str) -> String {
    let m = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    format!(
        r#"name: scale
namespace: my-demo
manifests:
  - file: {m}/seed-004-services.yaml
  - file: {m}/seed-004-gateway.yaml
  - file: {m}/seed-004-virtualsvc.yaml
  - inline: |
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {{name: rollouts-demo}}
      spec:
        replicas: 4
        selector: {{matchLabels: {{app: rollouts-demo}}}}
        template:
          metadata: {{labels: {{app: rollouts-demo}}}}
          spec: {{containers: [{{name: rollouts-demo, image: "argoproj/rollouts-demo:blue"}}]}}
        strategy:
          canary:
            canaryService: rollouts-demo-canary
            stableService: rollouts-demo-stable
            trafficRouting:
              istio: {{virtualService: {{name: rollouts-demo-vsvc, routes: [primary]}}}}
            steps: [{step}, {{setWeight: 20}}, {{pause: {{}}}}]
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: argoproj/rollouts-demo:yellow}}
  - wait: {{until: paused, timeout: 1m}}
"#
    )
}

#[test]
fn set_canary_scale_beyond_the_pods_canarysim_simulates_is_refused_at_its_place() {
    // 2147483647 pods (or that percent of 4 replicas) ran for minutes and took 4.5 GB.
    for (step, column, says) in [
        (
            "{setCanaryScale: {replicas: 2147483647}}",
            49,
            "setCanaryScale.replicas: 2147483647 pods, more pods than canarysim simulates (at most 100000 per workload)",
        ),
        (
            "{setCanaryScale: {weight: 2147483647}}",
            47,
            "setCanaryScale.weight: 2147483647 % of spec.replicas (4) is 85899346 pods, more pods than canarysim simulates (at most 100000 per workload)",
        ),
        (
            "{setCanaryScale: {weight: 2500001}}",
            47,
            "setCanaryScale.weight: 2500001 % of spec.replicas (4) is 100001 pods",
        ),
    ] {
        let file = support::write_temp("scale.yaml", &canary_scale(step));
        let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
        assert_eq!(code, 2, "{step}: {out}{err}");
        assert!(
            err.contains(&format!(
                "scale.yaml:23:{column}: Rollout \"rollouts-demo\": spec.strategy.canary.steps[0].{says}"
            )),
            "{step}: {err}"
        );
    }
    // Argo takes a weight over 100 (five times the replicas here): so does canarysim, and
    // exactly at the bound.
    for step in [
        "{setCanaryScale: {weight: 500}}",
        "{setCanaryScale: {weight: 2500000}}",
    ] {
        let file = support::write_temp("scale.yaml", &canary_scale(step));
        let (code, out, err) = canarysim(&["lint", file.to_str().unwrap()]);
        assert!(
            code == 0 && !out.contains("more pods"),
            "{step}: {out}{err}"
        );
    }
}

#[test]
fn a_rollout_of_more_steps_than_canarysim_simulates_is_refused_at_the_first_one_beyond() {
    // 5,000 steps ran past 30 s: every step change writes the whole Rollout's status.
    let pauses = |n: usize| vec!["{pause: {duration: 0s}}"; n].join(", ");
    // canary_scale adds two steps after the given ones: 999 + 2 steps are one too many.
    let file = support::write_temp("steps.yaml", &canary_scale(&pauses(999)));
    let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("steps.yaml:23:25014: ") && err.contains(
            "Rollout \"rollouts-demo\": spec.strategy.canary.steps: 1001 steps are more than canarysim simulates (at most 1000)"
        ),
        "{err}"
    );
    let file = support::write_temp("steps.yaml", &canary_scale(&pauses(998)));
    let (code, out, err) = canarysim(&["lint", file.to_str().unwrap()]);
    assert!(
        code == 0 && !err.contains("more than canarysim"),
        "{out}{err}"
    );
}

#[test]
fn an_analysis_interval_under_a_second_is_refused_at_its_place() {
    // `interval: 1ns` never settled: Argo keeps finishedAt to the second, so it measures
    // again at once until the second ends, a loop the virtual clock cannot run.
    let template = |interval: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {{name: rate}}\nspec:\n  metrics:\n  - name: ok\n    interval: {interval}\n    provider: {{job: {{spec: {{template: {{spec: {{containers: [{{name: c, image: busybox}}], restartPolicy: Never}}}}}}}}}}\n"
        )
    };
    for interval in ["1ns", "999ms", "0.5"] {
        let file = support::write_temp("analysis.yaml", &template(interval));
        let (code, out, err) = canarysim(&["lint", file.to_str().unwrap()]);
        assert_eq!(code, 1, "{interval}: {out}{err}");
        assert!(
            format!("{out}{err}").contains(&format!(
                "analysis.yaml:7:15: error: AnalysisTemplate \"rate\": spec.metrics[0].interval: {interval} is under a second"
            )),
            "{interval}: {out}{err}"
        );
    }
    for interval in ["1s", "1500ms", "5m"] {
        let file = support::write_temp("analysis.yaml", &template(interval));
        let (code, out, err) = canarysim(&["lint", file.to_str().unwrap()]);
        assert!(
            code == 0 && !err.contains("under a second"),
            "{interval}: {out}{err}"
        );
    }
}

#[test]
fn a_scenario_without_steps_is_refused_by_run_and_compare_not_by_envoy_config() {
    for (steps, at) in [
        ("", "scenario.yaml:1:1"),
        ("steps: []\n", "scenario.yaml:9:8"),
    ] {
        let file = support::write_temp("scenario.yaml", &format!("{}{steps}", world("")));
        let path = file.to_str().unwrap();
        for command in ["run", "compare"] {
            let (code, out, err) = canarysim(&[command, path]);
            assert_eq!(code, 2, "{command} {steps:?}: {out}{err}");
            assert_eq!(
                err,
                format!(
                    "{at}: steps: expected at least one step (a scenario without steps checks nothing, so it cannot pass)\n"
                )
                .replace("scenario.yaml", path),
                "{command}"
            );
        }
        // A world without steps is still a world to export.
        let (code, out, err) = canarysim(&["envoy-config", path]);
        assert_eq!(code, 0, "{out}{err}");
    }
    // In a folder, it is a file that does not load.
    let dir = support::temp_dir();
    std::fs::write(dir.path().join("a.yaml"), world("") + "steps: []\n").unwrap();
    let (code, out, err) = canarysim(&["run", dir.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("a.yaml:9:8: steps: expected at least one step"),
        "{err}"
    );
}

#[test]
fn nan_and_infinities_in_a_manifest_are_refused_where_written() {
    // `replicas: .nan` became null in silence: the rollout ran one pod.
    let file = support::write_temp(
        "nan.yaml",
        &format!(
            "{}steps:\n  - wait: 1m\n",
            world("").replace(
                "manifests:\n",
                "manifests:\n  - inline: |\n      apiVersion: v1\n      kind: Service\n      metadata: {name: extra}\n      spec: {ports: [{port: -.inf}]}\n"
            )
        ),
    );
    let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("nan.yaml:8:29: spec.ports[0].port: -.inf is not a number Kubernetes can store: expected a finite number (JSON has no NaN or infinity; kubectl refuses the file: json: unsupported value: -Inf)"),
        "{err}"
    );
    let manifest = support::write_temp(
        "rollout.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  replicas: .NaN\n",
    );
    let (code, out, err) = canarysim(&["lint", manifest.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("rollout.yaml:5:13: spec.replicas: .NaN is not a number Kubernetes can store"),
        "{err}"
    );
}

#[test]
fn a_service_port_listed_twice_is_refused_as_the_api_server_refuses_it() {
    for (ports, says) in [
        (
            "[{port: 80, name: a}, {port: 81, name: a}]",
            "7:80: Service \"extra\" is invalid: spec.ports[1].name: Duplicate value: \"a\"",
        ),
        (
            "[{port: 80, name: a}, {port: 80, name: b}]",
            "7:64: Service \"extra\" is invalid: spec.ports[1]: Duplicate value: port 80/TCP (a port and protocol may be listed once)",
        ),
    ] {
        let file = support::write_temp(
            "ports.yaml",
            &format!(
                "name: ports\nmanifests:\n  - inline: |\n      apiVersion: v1\n      kind: Service\n      metadata: {{name: extra}}\n      spec: {{selector: {{app: x}}, ports: {ports}}}\nsteps:\n  - wait: 1s\n"
            ),
        );
        let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
        assert_eq!(code, 2, "{ports}: {out}{err}");
        assert!(
            err.contains(&format!("ports.yaml:{says}")),
            "{ports}: {err}"
        );
    }
    // The same port for two protocols is two ports (DNS over UDP and TCP).
    let file = support::write_temp(
        "ports.yaml",
        "name: ports\nmanifests:\n  - inline: |\n      apiVersion: v1\n      kind: Service\n      metadata: {name: dns}\n      spec: {selector: {app: x}, ports: [{port: 53, name: udp, protocol: UDP}, {port: 53, name: tcp}]}\nsteps:\n  - wait: 1s\n",
    );
    let (code, out, err) = canarysim(&["run", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn a_virtualservice_that_argo_grows_on_every_write_stops_at_etcds_limit() {
    // http routes that share the name "primary", and managedRoutes: Argo's orderRoutes
    // writes each of them once per route of that name on every weight change (2, 4, 16,
    // 256, 65,536 routes; 10, 100, 10,000, 10^8), which ran out of memory (the fuzzer's two
    // out-of-memory cases). The API server refuses a write past etcd's limit, as a cluster
    // does, the routes are not assembled past it, and the wait that cannot end says why.
    let m = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/manifests");
    let route = "        - name: primary\n          route: [{destination: {host: rollouts-demo-stable}, weight: 100}, {destination: {host: rollouts-demo-canary}, weight: 0}]\n";
    for (routes, commands) in [(2, &["run", "compare"][..]), (10, &["run"][..])] {
        let file = support::write_temp(
            "grows.yaml",
            &format!(
                r#"name: grows
namespace: my-demo
manifests:
  - file: {m}/mirror-route-rollout.yaml
  - file: {m}/seed-004-services.yaml
  - file: {m}/seed-004-gateway.yaml
  - inline: |
      apiVersion: networking.istio.io/v1alpha3
      kind: VirtualService
      metadata: {{name: rollouts-demo-vsvc}}
      spec:
        gateways: [rollouts-demo-gateway]
        hosts: [rollouts-demo.local]
        http:
{}steps:
  - wait: {{until: healthy, timeout: 1m}}
  - set_image: {{rollout: rollouts-demo, container: rollouts-demo, image: "argoproj/rollouts-demo:yellow"}}
  - wait: {{until: paused, timeout: 1m}}
  - promote: rollouts-demo
  - wait: {{until: paused, timeout: 1m}}
  - promote: rollouts-demo
  - wait: {{until: healthy, timeout: 2m}}
"#,
                route.repeat(routes)
            ),
        );
        for command in commands {
            let (code, out, err) = canarysim(&[command, file.to_str().unwrap()]);
            assert_eq!(code, 1, "{routes} routes, {command}: {out}{err}");
            let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                out.contains("rollout is Progressing; the controller's last error: etcdserver: request is too large"),
                "{routes} routes, {command}: {out}"
            );
        }
    }
}
