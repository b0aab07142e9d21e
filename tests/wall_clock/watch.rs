//! `canarysim watch` against `serve --api` standing in for a cluster, its live router as the
//! gateway: the walkthrough's rollout with every pause indefinite, promoted by the test after
//! each row (so no load races a pause), and the same rollout behind a VirtualService whose
//! first route, not the one Argo manages, takes the traffic at 17 % — a data plane 3 points
//! off the weight the rollout sets, which `--abort-on-fail` aborts.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use canarysim::cluster::follow::{Ending, FollowOptions, Hooks, StepRow, WatchReport, follow};
use canarysim::cluster::{Cluster, ClusterOptions};
use canarysim::model::{Kind, ObjectKey};
use canarysim::verify::Outcome;
use serde_json::json;

use super::api_server::Served;
use crate::support;

/// The first route matches every request and holds its own weights: the managed `primary`
/// route is never reached.
const SHADOWED_VS: &str = "apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: rollouts-demo-vsvc
spec:
  gateways: [rollouts-demo-gateway]
  hosts: [rollouts-demo.local]
  http:
  - name: fixed
    route:
    - destination: {host: rollouts-demo-stable}
      weight: 83
    - destination: {host: rollouts-demo-canary}
      weight: 17
  - name: primary
    route:
    - destination: {host: rollouts-demo-stable}
      weight: 100
    - destination: {host: rollouts-demo-canary}
      weight: 0
";

/// The seed walkthrough's objects, its update with every pause indefinite, and `vs` (None:
/// the walkthrough's VirtualService); served with the API on a scaled clock.
fn serve_paused_walkthrough(dir: &Path, vs: Option<&str>) -> Served {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/manifests");
    let seed = |f: &str| manifests.join(f).display().to_string();
    let update = std::fs::read_to_string(manifests.join("seed-004-rollout-update.yaml"))
        .unwrap()
        .replace("pause: {duration: 1m}", "pause: {}");
    std::fs::write(dir.join("update.yaml"), update).unwrap();
    let vs_file = match vs {
        Some(text) => {
            std::fs::write(dir.join("vs.yaml"), text).unwrap();
            dir.join("vs.yaml").display().to_string()
        }
        None => seed("seed-004-virtualsvc.yaml"),
    };
    let scenario = format!(
        "name: watch-paused
seed: 1
namespace: my-demo
manifests:
  - file: {}
  - file: {}
  - file: {}
  - file: {vs_file}
cluster: {{pod_ready_after: 5s, push_delay: 100ms}}
steps:
  - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}
  - apply: update.yaml
  - wait: {{until: paused, timeout: 5m}}
",
        seed("seed-004-rollout.yaml"),
        seed("seed-004-services.yaml"),
        seed("seed-004-gateway.yaml"),
    );
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, scenario).unwrap();
    let plan = canarysim::scenario::load(&path, &canarysim::scenario::Disk).unwrap();
    Served::start_plan(plan, false, 60.0, dir.join("kubeconfig"))
}

/// `watch`'s options for the router (`within` points), with `load`'s flags read as the command line reads them.
fn options(router: &str, within: f64, abort_on_fail: bool) -> FollowOptions {
    use clap::Parser;
    let cli = canarysim::cli::Cli::parse_from([
        "canarysim",
        "load",
        router,
        "-n",
        "1",
        "-c",
        "8",
        "--host",
        "rollouts-demo.local",
    ]);
    let canarysim::cli::Command::Load(args) = cli.command else {
        unreachable!()
    };
    FollowOptions {
        rollout: "rollouts-demo".into(),
        load: canarysim::cli::plan_load(&args).unwrap().load,
        url: router.into(),
        requests: 60_000,
        within,
        confidence: 0.99,
        settle: Duration::from_secs(30),
        canary_version: None,
        abort_on_fail,
        // A guard against a hang, far beyond the few seconds each step takes.
        timeout: Some(Duration::from_secs(600)),
        quiet: true,
    }
}

fn cluster(kubeconfig: PathBuf) -> Cluster {
    Cluster::connect(&ClusterOptions {
        kubeconfig: Some(kubeconfig),
        ..ClusterOptions::default()
    })
    .expect("a client for the served API")
}

/// `watch` on a thread; its rows arrive on the receiver as they are measured.
fn start_watch(
    kubeconfig: PathBuf,
    options: FollowOptions,
) -> (
    mpsc::Receiver<StepRow>,
    std::thread::JoinHandle<WatchReport>,
) {
    let (send, rows) = mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let cluster = cluster(kubeconfig);
        assert_eq!(cluster.namespace(), "my-demo", "the kubeconfig's namespace");
        let mut row = |r: &StepRow| {
            let _ = send.send(r.clone());
        };
        let hooks = Hooks {
            row: &mut row,
            say: &|_| {},
        };
        follow(&cluster, &options, hooks).expect("watch follows the rollout")
    });
    (rows, watcher)
}

fn next_row(rows: &mpsc::Receiver<StepRow>) -> StepRow {
    rows.recv_timeout(Duration::from_secs(300))
        .expect("watch reports the step")
}

/// `watch --format json` prints the report as serialised here.
fn assert_matches_schema(report: &WatchReport) {
    let schema_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/watch.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_file).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let value = serde_json::to_value(report).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut broken = value.clone();
    broken["rows"][0].as_object_mut().unwrap().remove("verdict");
    assert!(
        !validator.is_valid(&broken),
        "the schema requires each field"
    );
}

fn rollout_key() -> ObjectKey {
    ObjectKey::new(Kind::Rollout, "my-demo", "rollouts-demo")
}

#[test]
fn watch_verifies_each_step_promoted_by_hand_and_the_completion() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig");
    let (rows, watcher) = start_watch(kubeconfig.clone(), options(&served.router(), 2.0, false));
    let promoter = cluster(kubeconfig);
    for (step, weight) in [(1, 20.0), (3, 40.0), (5, 60.0), (7, 80.0)] {
        let row = next_row(&rows);
        assert_eq!(
            (row.step, row.set_weight, row.router_weight),
            (Some(step), weight, Some(weight)),
            "{row:?}"
        );
        assert_eq!(row.route, "rollouts-demo-vsvc http/primary");
        assert_eq!(row.version, "yellow");
        assert_eq!(row.verdict, Some(Outcome::Pass), "{row:?}");
        let observed = row.observed.unwrap();
        assert!((observed - weight).abs() < 2.0, "{row:?}");
        // `kubectl argo rollouts promote`: the pause condition cleared on the status.
        promoter
            .patch_status(&rollout_key(), json!({"status": {"pauseConditions": null}}))
            .unwrap();
    }
    let end = next_row(&rows);
    assert_eq!((end.step, end.expected), (None, Some(100.0)), "{end:?}");
    assert_eq!(end.verdict, Some(Outcome::Pass), "{end:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::Completed);
    assert_eq!(report.rows.len(), 5);
    assert_eq!(report.exit_code(), 0);
    assert_matches_schema(&report);
    served.stop();
}

#[test]
fn watch_fails_a_data_plane_three_points_off_and_aborts_the_rollout() {
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), Some(SHADOWED_VS));
    let kubeconfig = dir.path().join("kubeconfig");
    let (rows, watcher) = start_watch(kubeconfig.clone(), options(&served.router(), 1.0, true));
    let row = next_row(&rows);
    assert_eq!(
        (row.step, row.router_weight),
        (Some(1), Some(20.0)),
        "{row:?}"
    );
    assert_eq!(row.verdict, Some(Outcome::Fail), "{row:?}");
    let observed = row.observed.unwrap();
    assert!((observed - 17.0).abs() < 1.5, "{row:?}");
    let report = watcher.join().unwrap();
    assert_eq!(report.ending, Ending::AbortedByCanarysim);
    assert_eq!(report.exit_code(), 1);
    assert_matches_schema(&report);
    let rollout = cluster(kubeconfig).get(&rollout_key()).unwrap().unwrap();
    assert_eq!(rollout.status()["abort"], true, "{:?}", rollout.status());
    served.stop();
}

#[test]
fn watch_says_what_it_cannot_read_and_exits_2() {
    use canarysim::cli::{Cli, execute};
    use clap::Parser;
    let watch = |extra: &[&str]| {
        let mut args = vec![
            "canarysim",
            "watch",
            "--url",
            "http://127.0.0.1:9/",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        execute(Cli::parse_from(args))
    };
    let (code, _, err) = watch(&["rollouts-demo", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("canarysim watch: cannot read kubeconfig /nonexistent/kubeconfig: "),
        "{err}"
    );
    let dir = support::temp_dir();
    let served = serve_paused_walkthrough(dir.path(), None);
    let kubeconfig = dir.path().join("kubeconfig").display().to_string();
    let (code, _, err) = watch(&["no-such-rollout", "--kubeconfig", &kubeconfig]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "canarysim watch: rollout no-such-rollout not found in namespace my-demo\n"
    );
    let (code, _, err) = watch(&[
        "rollouts-demo",
        "--kubeconfig",
        &kubeconfig,
        "--settle",
        "soon",
    ]);
    assert_eq!(
        (code, err.as_str()),
        (2, "--settle \"soon\": expected a duration, e.g. 30s\n")
    );
    served.stop();
}
