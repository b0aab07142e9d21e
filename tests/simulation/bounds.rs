//! Numbers beyond what canarysim runs are refused at the border, with the field, its place
//! in the file and the bound; inputs that once panicked now run (regressions found by
//! trying canarysim as a new user would).

use canarysim::cli::{Cli, execute};
use clap::Parser;

use crate::support;

/// The report with its wrapped lines joined again (long details wrap at 100 columns with
/// a hanging indent).
fn unwrapped(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let body = line.trim_start();
        if !out.is_empty() && line.len() - body.len() >= 10 && !body.is_empty() {
            out.push(' ');
        } else if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(body);
    }
    out
}

fn run(name: &str, text: &str) -> (u8, String, String) {
    run_with(name, text, &[])
}

/// `canarysim run` on `text` written to a temporary `name`, with `flags` after the file.
fn run_with(name: &str, text: &str, flags: &[&str]) -> (u8, String, String) {
    let path = support::write_temp(name, text);
    let mut argv = vec!["canarysim", "run", path.to_str().unwrap()];
    argv.extend_from_slice(flags);
    execute(Cli::parse_from(argv))
}

const SERVICE: &str = r#"name: bounds
namespace: ns
manifests:
  - inline: |
      apiVersion: v1
      kind: Service
      metadata: {name: demo}
      spec: {selector: {app: demo}, ports: [{port: 80}]}
traffic: {host: demo}
steps:
"#;

#[test]
fn load_numbers_beyond_the_bounds_are_refused_with_the_field_and_the_bound() {
    let cases = [
        (
            "{requests: 10, connections: 4294967295}",
            "11:39: connections: 4294967295 is outside 1..=100000",
        ),
        (
            "{requests: 10, connections: 0}",
            "11:39: connections: 0 is outside 1..=100000",
        ),
        (
            "{requests: 10, rate: -5}",
            "11:32: rate: -5 requests per second: expected a number above 0",
        ),
        (
            "{requests: 1000000000000}",
            "11:22: requests: 1000000000000 is more than one load step sends (at most 1000000000)",
        ),
        (
            "{duration: 1000h, rate: 1000000}",
            "11:22: duration: 1000h is longer than one load step runs (at most 24h",
        ),
        (
            "{duration: 24h, rate: 1000000}",
            "rate × duration is 86400000000 requests, more than one load step sends",
        ),
    ];
    for (load, expected) in cases {
        let (code, out, err) = run("bounds.yaml", &format!("{SERVICE}  - load: {load}\n"));
        assert_eq!(code, 2, "{load}: {out}{err}");
        assert!(err.contains(expected), "{load}: {err}");
        assert!(
            err.contains("bounds.yaml:"),
            "{load}: the file is named: {err}"
        );
    }
}

const ROLLOUT: &str = r#"name: rollout
namespace: ns
manifests:
  - inline: |
      apiVersion: argoproj.io/v1alpha1
      kind: Rollout
      metadata: {name: demo}
      spec:
        replicas: REPLICAS
        selector: {matchLabels: {app: demo}}
        template:
          metadata: {labels: {app: demo}}
          spec:
            containers: CONTAINERS
        strategy: {canary: {steps: [{setWeight: 50}]}}
steps:
  - set_image: {rollout: demo, container: "*", image: "demo:2"}
  - wait: 10s
"#;

#[test]
fn replicas_beyond_what_is_simulated_are_refused_not_overflowed() {
    let text = ROLLOUT
        .replace("REPLICAS", "2147483647")
        .replace("CONTAINERS", r#"[{name: app, image: "demo:1"}]"#);
    let (code, out, err) = run("replicas.yaml", &text);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("replicas.yaml:9:19: Rollout \"demo\": spec.replicas: 2147483647 is more pods than canarysim simulates (at most 100000 per workload)"),
        "{err}"
    );
}

#[test]
fn set_image_on_every_container_skips_a_list_entry_that_is_not_one() {
    // `container: "*"` over a containers list holding a string once panicked.
    let text = ROLLOUT.replace("REPLICAS", "2").replace(
        "CONTAINERS",
        r#"["not-a-container", {name: app, image: "demo:1"}]"#,
    );
    let (code, out, err) = run("star.yaml", &text);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("app image is demo:2") || out.contains("* image is demo:2"),
        "{out}"
    );
}

#[test]
fn a_load_stopped_by_the_24_hour_cap_says_so() {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let m = |f: &str| manifests.join(f).display().to_string();
    let text = format!(
        r#"name: capped
namespace: my-demo
manifests:
  - file: {}
  - file: {}
  - file: {}
  - file: {}
cluster:
  backends:
    argoproj/rollouts-demo:blue: {{latency: 10s}}
traffic: {{host: rollouts-demo.local, connections: 1}}
steps:
  - wait: {{until: healthy, timeout: 1m}}
  - wait: 1s
  - load: {{requests: 1000000000}}
"#,
        m("seed-004-rollout.yaml"),
        m("seed-004-services.yaml"),
        m("seed-004-gateway.yaml"),
        m("seed-004-virtualsvc.yaml"),
    );
    let (code, out, err) = run_with("capped.yaml", &text, &["--format", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let load = &report["steps"][2]["load"];
    // One connection, 10 s per answer: 24 h holds 8,640 of them.
    let sent = load["sent"].as_u64().unwrap();
    assert!((8_640..=8_641).contains(&sent), "{load}");
    assert_eq!(
        load["capped"],
        format!(
            "stopped at the 24 h cap on a load's scenario time after {sent} requests; asked for 1000000000"
        )
    );
    assert!(
        report["steps"][2]["detail"]
            .as_str()
            .unwrap()
            .contains("stopped at the 24 h cap")
    );
}

#[test]
fn a_load_estimated_above_the_request_budget_is_refused_before_it_sends() {
    // 100 connections for an hour against pods answering in 1 ms: 360 million requests,
    // above the default budget of 100 million.
    let text = format!(
        "{SERVICE}  - load: {{duration: 1h, connections: 100}}\n  - load: {{requests: 500}}\n"
    );
    let (code, out, err) = run("budget.yaml", &text);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        unwrapped(&out).contains("refused: this load would send about 360000000 simulated requests, more than the request budget of 100000000 per load step; `canarysim run --request-budget 360000000` raises it"),
        "{out}"
    );

    // The flag sets the budget: a step at it runs, a step above it is refused.
    let (code, out, err) = run_with(
        "budget-flag.yaml",
        &format!(
            "{SERVICE}  - load: {{requests: 1000}}\n  - load: {{duration: 1s, connections: 2}}\n"
        ),
        &["--request-budget", "1000", "--format", "json"],
    );
    assert_eq!(code, 1, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["steps"][0]["load"]["sent"], 1000, "{out}");
    // Two connections for a second at 1 ms an answer: 2,000.
    let refused = report["steps"][1]["detail"].as_str().unwrap();
    assert!(
        refused.contains("about 2000 simulated requests, more than the request budget of 1000"),
        "{refused}"
    );
}
